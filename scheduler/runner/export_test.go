package runner

// SetBeforeReasonWrite sets a function called between the check that a pod
// is unbound and the write of its pending reason: a test binds the pod there.
func (r *Runner) SetBeforeReasonWrite(f func(ns, name string)) { r.beforeReasonWrite = f }
