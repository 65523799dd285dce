// Package charts holds allot's Helm chart (allot/) and its tests: the chart
// renders what kustomize gives for config/, installs on a real API server
// with Helm's own library, and refuses bad values with values.schema.json.
//
// It is a module of its own (go.mod here): Helm's library needs newer
// Kubernetes modules than allot's, which stay as they are.
//
// The chart's CRDs (allot/crds) and the manager's ClusterRole rules
// (allot/files/manager-role.yaml) are copies of what make generate writes in
// config/; go generate ./... here copies them again, and TestGeneratedCopies
// fails while they differ.
package charts

//go:generate sh -c "rm -f allot/crds/*.yaml && cp ../config/crd/allot.dev_*.yaml allot/crds/ && cp ../config/rbac/role.yaml allot/files/manager-role.yaml"
