// Package detach runs an eval's coordinator on a machine of its own, so a
// run outlives the laptop that started it (mst run --detach).
//
// The launching mst checks the run, writes a bundle (Spec in detach.json,
// the eval config file, the datasets as loaded in datasets.json), has the
// runner create a coordinator machine (runner.CoordinatorMachine), copies
// the bundle there and starts `mst coordinate` over the machine's channel,
// with the secrets file's values on its stdin. `mst coordinate` starts the
// coordinator (Coordinator.Run) in a session of its own and returns.
//
// The coordinator runs the commands a person would type, one after the
// other, on its machine: mst run (or mst run --resume, or mst grade), mst
// run --resume once more when the run is partial, and mst grade --runner
// when the run grades on a runner. It writes its records beside the
// eval's runs in the result store (Records): status.json, rewritten with
// every heartbeat; log.txt, its output, uploaded every minute and at the
// end; and it stops when it finds the cancel marker mst runs cancel writes.
// mst runs reads those records, never the machines.
package detach
