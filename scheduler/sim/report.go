package sim

import "github.com/allot-dev/allot/schema/quantity"

// Report is the result of a simulation; its JSON is the `allot sim -o json`
// contract of docs/contracts.md.
type Report struct {
	Summary Summary      `json:"summary"`
	Teams   []TeamReport `json:"teams"`
	Jobs    []JobReport  `json:"jobs"`
	// Clusters extends the contract: one row per cluster, when the nodes name
	// clusters.
	Clusters []ClusterReport `json:"clusters,omitempty"`
	// Burst extends the contract: what the pools that burst held and cost,
	// when some pool declares burst (docs/elastic.md#in-the-simulator).
	Burst *BurstReport `json:"burst,omitempty"`
}

// BurstReport is what the burst pools held over the replay, billed on
// demand from the decision that asked for a node to its removal.
type BurstReport struct {
	Pools []BurstPoolReport `json:"pools"`
	// Teams attribute the burst nodes to the teams whose gangs caused them
	// (team "": nobody's, elastic.State.BurstTeams), over all pools.
	Teams   []BurstTeamReport `json:"teams"`
	CostUSD quantity.Decimal  `json:"cost_usd"`
	// Without is the same replay without burst, when it was run.
	Without *BurstComparison `json:"without_burst,omitempty"`
}

// BurstPoolReport is one pool's burst nodes: the most held at once, their
// node-hours and GPU-hours, and their cost (node-hours times the pool's
// on-demand price per node-hour, exactly).
type BurstPoolReport struct {
	Pool      string           `json:"pool"`
	PeakNodes int64            `json:"peak_nodes"`
	NodeHours float64          `json:"node_hours"`
	GPUHours  float64          `json:"gpu_hours"`
	CostUSD   quantity.Decimal `json:"cost_usd"`
}

// BurstTeamReport is the burst GPU-hours and cost a team's gangs caused.
type BurstTeamReport struct {
	Team     string           `json:"team"`
	GPUHours float64          `json:"gpu_hours"`
	CostUSD  quantity.Decimal `json:"cost_usd"`
	gpuHours quantity.Decimal
}

// BurstComparison is the replay without burst: its waits, and what burst
// saved of them and added in cost.
type BurstComparison struct {
	WaitMeanS      float64          `json:"wait_mean_s"`
	WaitP50S       float64          `json:"wait_p50_s"`
	WaitP95S       float64          `json:"wait_p95_s"`
	Unschedulable  int              `json:"unschedulable"`
	WaitMeanSavedS float64          `json:"wait_mean_saved_s"`
	WaitP95SavedS  float64          `json:"wait_p95_saved_s"`
	CostAddedUSD   quantity.Decimal `json:"cost_added_usd"`
}

// ClusterReport is what ran in one cluster.
type ClusterReport struct {
	Cluster string `json:"cluster"`
	// Jobs whose last placement was in the cluster.
	Jobs       int     `json:"jobs"`
	GPUSeconds float64 `json:"gpu_seconds"`
	// MovedIn counts the jobs that ran elsewhere before they last ran here
	// (moved after a fault or preemption, as when their cluster was lost).
	MovedIn int `json:"moved_in"`
}

// Summary holds the run's totals. The violation counters come from invariant
// checks after every step and must stay 0.
type Summary struct {
	Jobs               int     `json:"jobs"`
	Completed          int     `json:"completed"`
	Unschedulable      int     `json:"unschedulable"`
	GPUUtilization     float64 `json:"gpu_utilization"`
	WaitP50S           float64 `json:"wait_p50_s"`
	WaitP95S           float64 `json:"wait_p95_s"`
	Preemptions        int     `json:"preemptions"`
	GangViolations     int     `json:"gang_violations"`
	QuotaViolations    int     `json:"quota_violations"`
	TopologyViolations int     `json:"topology_violations"`
	MakespanS          float64 `json:"makespan_s"`
	WallS              float64 `json:"wall_s"`
	DecisionsPerS      float64 `json:"decisions_per_s"`
	// WholeDomainShare extends the contract: of the time there was work and
	// at least one top-level domain's worth of free healthy GPUs, the share
	// during which a whole top-level domain (a node's widest topology domain,
	// or the node without one) was free; absent when never. Higher is less
	// fragmented.
	WholeDomainShare *float64 `json:"whole_domain_share,omitempty"`
}

// TeamReport is one team's figures.
type TeamReport struct {
	Team         string  `json:"team"`
	GPUSeconds   float64 `json:"gpu_seconds"`
	Share        float64 `json:"share"`
	NominalShare float64 `json:"nominal_share"`
	WaitP95S     float64 `json:"wait_p95_s"`
	Preempted    int     `json:"preempted"`
}

// JobReport is one job's fate. Start, End and WaitS are null for a job that never
// ran (End also for one that ran but never finished); Reason then says why.
type JobReport struct {
	ID        string            `json:"id"`
	Team      string            `json:"team"`
	Tier      string            `json:"tier"`
	GPUs      int64             `json:"gpus"`
	Submit    float64           `json:"submit"`
	Start     *float64          `json:"start"`
	End       *float64          `json:"end"`
	WaitS     *float64          `json:"wait_s"`
	Preempted int               `json:"preempted"`
	Nodes     []string          `json:"nodes"`
	Domain    map[string]string `json:"domain"`
	// Cluster is the cluster of the last placement ("" when the job never ran
	// or the nodes name no cluster).
	Cluster string `json:"cluster"`
	// Reason and ReasonCode extend the contract for jobs that did not complete.
	Reason     string `json:"reason,omitempty"`
	ReasonCode string `json:"reason_code,omitempty"`
}
