package scheduler

// testHooks are what the package's own tests watch and switch inside the
// core; Scheduler.test is nil everywhere else, and a nil test changes no
// decision. A hook that watches may check the decision it sees beside one
// made the slow way; a switch turns a speed-up off, so that a test compares
// the core with and without it.
type testHooks struct {
	// classHit sees each workload a class's failure decided, with the
	// reason it was given.
	classHit func(*workload, PendingReason)
	// searched is called as a preemption search starts evicting what-if
	// (done false) and once a failed one has put everything back (done true).
	searched func(done bool)
	// memoCheck runs each search the memo would skip and is told whether it
	// found victims (memo.go).
	memoCheck func(w *workload, ok bool)
	// boundCheck runs each search's bounds a refusal of another search
	// would skip (memo.go) and is told whether they refused it.
	boundCheck func(w *workload, refused bool)
	// crossTally sees what each tally found; the search is then run by
	// what-if evictions too, whose answer it checks (tally.go).
	crossTally func(w *workload, keep []candidate, ok bool) (check func(keep []candidate, ok bool))
	// checkRuns sees each run bound skipLearnt takes from a cache that no
	// change of the queue touched since, beside the one a scan of the same
	// entries finds now (skip.go).
	checkRuns func(cached runBound, scanned runBound, ok bool)
	// noTally makes every search evict what-if instead of tallying.
	noTally bool
	// noSkip makes a walk consider every workload, with no run passed over.
	noSkip bool
	// passedEarly sees each run passed early.
	passedEarly func()
	// noQuotaRoom counts every free GPU in a search's room (roomFor), the
	// team's quota aside; quotaRoomCut sees each room the quota lowered.
	noQuotaRoom  bool
	quotaRoomCut func()
	// runPassed sees how many workloads each passRun passed over.
	runPassed func(n int)
	// learnt sees how many workloads each run learnt from its entries
	// holds (skip.go).
	learnt func(n int)
}
