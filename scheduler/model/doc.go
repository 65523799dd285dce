// Package model is the scheduling core's leaf model: what it is given (the
// fleet's nodes and topology domains, the quota tree of teams, cohorts and
// tiers, workloads, options) and what it answers (a cycle's admissions,
// preemptions and evictions, and why each other workload waits, with advice
// for its owner). It holds data and its rendering only; package scheduler
// decides, and names every type here too.
package model
