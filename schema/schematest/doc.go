// Package schematest makes configurations for tests: random ones that the
// schema accepts, up to its bounds, for the fuzz tests of the planner and the
// simulator.
package schematest
