// Package fleet owns clusters, pools and nodes as the scheduler and the renderers
// see them: how a pool's nodes are named and laid out in topology domains, and the
// node labels that carry that layout.
package fleet
