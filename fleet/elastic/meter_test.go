package elastic

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestMeterCountsWhatWasHeld(t *testing.T) {
	start := Meter(Metered{}, nil, nil, t0.Add(-time.Hour))
	if idle := Meter(start, nil, nil, t0.Add(-time.Minute)); !idle.At.Equal(start.At) {
		t.Fatalf("nothing held: at %v; want %v, unchanged", idle.At, start.At)
	}
	m := Meter(start, nil, []TeamNodes{{Team: "a", Nodes: 2}}, t0)
	if !m.Since.Equal(t0.Add(-time.Hour)) || !m.At.Equal(t0) || len(m.Teams) != 0 {
		t.Fatalf("first nodes %+v; want counting from t0, nothing counted", m)
	}
	// 90.5 s with a:2, b:1: 180 and 90 node-seconds, the half second kept.
	m = Meter(m, []TeamNodes{{Team: "b", Nodes: 1}, {Team: "a", Nodes: 2}, {Team: "c", Nodes: 0}}, []TeamNodes{{Team: "a", Nodes: 1}}, t0.Add(90500*time.Millisecond))
	want := []TeamSeconds{{"a", 180}, {"b", 90}}
	if fmt.Sprint(m.Teams) != fmt.Sprint(want) || !m.At.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("after 90.5 s: %+v at %v; want %v at t0+90s", m.Teams, m.At, want)
	}
	m = Meter(m, []TeamNodes{{Team: "a", Nodes: 1}}, nil, t0.Add(100*time.Second))
	if m.Teams[0] != (TeamSeconds{"a", 190}) || !m.Since.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("after 100 s: %+v since %v; want a 190 since the start", m.Teams, m.Since)
	}
	// While the holdings stand, at most one count a MeterEvery; the time
	// between is counted with the next.
	a := []TeamNodes{{Team: "a", Nodes: 1}}
	if same := Meter(m, a, a, t0.Add(130*time.Second)); !same.At.Equal(m.At) || same.Teams[0].NodeSeconds != 190 {
		t.Fatalf("30 s on: %+v at %v; want unchanged", same.Teams, same.At)
	}
	if later := Meter(m, a, a, t0.Add(160*time.Second)); later.Teams[0].NodeSeconds != 250 {
		t.Fatalf("60 s on: %+v; want a 250", later.Teams)
	}
	if moved := Meter(m, a, nil, t0.Add(101*time.Second)); moved.Teams[0].NodeSeconds != 191 {
		t.Fatalf("a change 1 s on: %+v; want it counted, a 191", moved.Teams)
	}
	// A clock that goes back counts nothing and restarts from now.
	back := Meter(m, []TeamNodes{{Team: "a", Nodes: 5}}, nil, t0)
	if back.Teams[0].NodeSeconds != 190 || !back.At.Equal(t0) {
		t.Fatalf("clock back: %+v at %v", back.Teams, back.At)
	}
}

func TestMeterIsBounded(t *testing.T) {
	m := Meter(Metered{}, nil, nil, t0)
	var held []TeamNodes
	for i := range 2 * MaxMeteredTeams {
		held = append(held, TeamNodes{Team: fmt.Sprintf("t%04d", i), Nodes: 1})
	}
	m = Meter(m, held, nil, t0.Add(time.Second))
	if len(m.Teams) != MaxMeteredTeams {
		t.Fatalf("%d teams metered; want at most %d", len(m.Teams), MaxMeteredTeams)
	}
	var sum int64
	for _, ts := range m.Teams {
		sum += ts.NodeSeconds
	}
	if sum != int64(len(held)) || m.Teams[0].Team != "" || m.Teams[0].NodeSeconds != int64(MaxMeteredTeams+1) {
		t.Fatalf("sum %d, first %+v; want every node-second counted, the rest under \"\"", sum, m.Teams[0])
	}
	huge := Meter(Metered{Since: t0, At: t0, Teams: []TeamSeconds{{"a", math.MaxInt64 - 1}}}, []TeamNodes{{Team: "a", Nodes: math.MaxInt64}}, nil, t0.Add(time.Hour))
	if huge.Teams[0].NodeSeconds != math.MaxInt64 {
		t.Fatalf("overflow: %d", huge.Teams[0].NodeSeconds)
	}
}

// A meter read back from a status with as many teams as it may hold, none
// of them "", still stays within MaxMeteredTeams and loses nothing.
func TestMeterFoldsAFullStatus(t *testing.T) {
	m := Metered{Since: t0, At: t0}
	for i := range MaxMeteredTeams + 5 {
		m.Teams = append(m.Teams, TeamSeconds{Team: fmt.Sprintf("t%04d", i), NodeSeconds: 1})
	}
	out := Meter(m, []TeamNodes{{Team: "new", Nodes: 1}}, nil, t0.Add(time.Minute))
	var sum int64
	for _, ts := range out.Teams {
		sum += ts.NodeSeconds
	}
	if len(out.Teams) > MaxMeteredTeams || sum != MaxMeteredTeams+5+60 {
		t.Fatalf("%d teams, %d node-seconds; want at most %d teams, %d node-seconds", len(out.Teams), sum, MaxMeteredTeams, MaxMeteredTeams+5+60)
	}
}
