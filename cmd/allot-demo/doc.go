// Command allot-demo is 'make demo': the example organisation run end to end on
// an embedded control plane.
//
// It starts kube-apiserver and etcd from bin/ (make controlplane) with allot's
// CRDs, puts examples/ in a local Git repository (with a simulated kwok lab
// cluster added), starts 'allot manager' (the real binary, as a child process,
// running Terraform for the lab cluster) and a CapacitySource that follows the
// repository, creates the other pools' nodes as Node objects (at most
// --max-nodes-per-pool per pool; the lab's are made by Terraform's kwok module),
// submits a small mixed workload of single pods and gangs and prints how it was
// scheduled. Then it commits a quota raise (one that grows the lab pool first),
// prints 'allot plan --base HEAD~1' for it, waits until the manager applied the
// new revision and prints the scheduling again with what changed. Last, it
// fails a GPU under the lab's gang and shows repair replace the node.
//
// Everything it starts (the manager, the control plane, temporary directories)
// is stopped when it ends, fails or receives SIGINT or SIGTERM. A step that
// does not happen in bounded time ends the demo with a one-line error and exit
// status 1.
//
// With --fleet (make demo-fleet) it runs the fleet instead: three control
// planes (a hub and two workers at two prices), 'allot manager --hub' on the
// hub and 'allot manager --cluster NAME --quota-from-hub' on each worker; a Job
// submitted to the hub is routed to the cheaper worker, whose scheduler binds
// its pods (made by the demo, as the worker's Job controller would); that
// worker's API server stops, and after its failoverAfter the job is routed to
// the other; 'allot explain' on the hub says where and why.
//
//	go run ./cmd/allot-demo --allot bin/allot
//	go run ./cmd/allot-demo --fleet --allot bin/allot
package main
