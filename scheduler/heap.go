package scheduler

// siftDown moves h[i] down a binary heap ordered by less (the walk's team
// cursors, a search's reclaim streams): the heaps are written out rather than
// behind container/heap's interface, which a busy cycle calls hundreds of
// thousands of times.
func siftDown[T any](h []T, i int, less func(a, b T) bool) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		j := l
		if r := l + 1; r < n && less(h[r], h[l]) {
			j = r
		}
		if !less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
