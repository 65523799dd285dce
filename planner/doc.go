// Package planner owns the capacity plan: pool sizes from the teams' quotas, the
// monthly cost of every pool, team and cost centre, and the diff of two plans. It is
// a pure function of the configuration; renderers and the Terraform runner live in
// subpackages.
package planner
