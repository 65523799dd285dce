package model

import "testing"

// Every reason the core gives has advice for the workload's owner.
func TestEveryReasonHasAdvice(t *testing.T) {
	for _, c := range []ReasonCode{ReasonQueued, ReasonOverQuota, ReasonCohortExhausted, ReasonNoTopologyDomain,
		ReasonInsufficientNodes, ReasonBehindHigherTier, ReasonReserved, ReasonWaitingForReservation, ReasonNoFlavor, ReasonBackoff, ReasonNoMatchingNodes} {
		if c.Advice() == "" {
			t.Errorf("reason %s has no advice", c)
		}
	}
	if ReasonCode("Made-up").Advice() != "" {
		t.Error("an unknown code has advice")
	}
}
