package scheduler

var DebugCounts = map[string]int{}
