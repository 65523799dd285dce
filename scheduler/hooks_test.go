package scheduler

// hooks returns s's test hooks, made on first use.
func (s *Scheduler) hooks() *testHooks {
	if s.test == nil {
		s.test = &testHooks{}
	}
	return s.test
}
