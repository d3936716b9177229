package worker

// SetSharedMin sets the least model size for which learners in one
// process average in place, for the tests of package worker_test; the
// returned func restores it.
func SetSharedMin(n int) (restore func()) {
	old := sharedMin
	sharedMin = n
	return func() { sharedMin = old }
}
