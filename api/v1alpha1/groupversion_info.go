package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of the allot resources.
var GroupVersion = schema.GroupVersion{Group: "allot.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers the allot types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the allot types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Team{}, &TeamList{},
		&Cohort{}, &CohortList{},
		&Tier{}, &TierList{},
		&Pool{}, &PoolList{},
		&CapacitySource{}, &CapacitySourceList{},
		&Cluster{}, &ClusterList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
