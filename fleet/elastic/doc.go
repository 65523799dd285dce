// Package elastic owns how a pool's size follows its health: the replacement
// nodes it holds beyond its plan while nodes are lost, and the nodes it
// retires (docs/elastic.md). It is pure: the Pool reconciler reads the nodes
// and keeps the State on the Pool's status, and the same rules run in the
// simulator.
package elastic
