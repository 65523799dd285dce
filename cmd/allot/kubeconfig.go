package main

import (
	"errors"
	"fmt"

	"k8s.io/client-go/tools/clientcmd"
)

// errNoKubeconfig is what a verb that reaches a cluster says when no
// kubeconfig is found and it does not run in a pod: one line naming where it
// looked, instead of client-go's advice to set KUBERNETES_MASTER.
var errNoKubeconfig = errors.New("no kubeconfig found: pass --kubeconfig FILE or set KUBECONFIG (default ~/.kube/config; in a pod, its service account is used)")

// reachError is err, a failure to build a client configuration, as the user
// should read it.
func reachError(err error) error {
	if clientcmd.IsEmptyConfig(err) {
		return usageError{errNoKubeconfig}
	}
	return usageError{fmt.Errorf("reaching the cluster: %w", err)}
}
