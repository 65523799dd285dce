// Package reference is the baseline allot's scheduler is measured against: greedy
// first-fit backfill with no quotas, tiers, preemption or topology. Every cycle it
// walks the pending jobs in submission order and starts each one whose pods all fit,
// each pod on the first node (in fleet order) with room whose class the job's
// placement rules admit.
package reference
