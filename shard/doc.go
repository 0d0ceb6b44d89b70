// Package shard is mst.shard/v1, the protocol between the coordinator of a
// run and the worker that runs one shard of it, with both sides: the worker
// (the one trial loop every runner uses, local included) and the
// coordinator's Serve.
//
// A shard is the trials of whole cases. Messages are JSON objects, one per
// line, each with a "type"; unknown fields are ignored and unknown types
// are an error (ErrUnknownMessage). The worker writes only protocol lines
// to its stdout; its logs go to stderr. docs/protocol.md describes every
// message and field.
//
//	worker                                  coordinator
//	  (asks its clients' programs for their versions; heartbeats meanwhile)
//	  hello {protocol, mstVersion, …}  ──▶   refuses another version, or an OS
//	                                         its clients do not run on
//	                                   ◀──   tokens {values}   (the run's secrets)
//	  (once accepted: readiness check of every server)
//	  acquire {id, key, providers, servers} ▶ waits for room under the limits
//	                                   ◀──   granted {id}
//	  acquire-call {id, server}        ──▶   waits for room under the call limits
//	                                   ◀──   call-granted {id}
//	  release-call {id}                ──▶   (the tool call ended)
//	  (runs the trial, writes its transcript)
//	  trial {acquire, key, status, path} ──▶ gives the room back, grades
//	  heartbeat {inFlight, done}       ──▶   (every 10 s; 60 s of silence: lost)
//	                                   ◀──   cancel {reason}   (Ctrl-C)
//	  need-tokens {names, servers}     ──▶   asks its token source
//	                                   ◀──   tokens {values, expires}
//	  done {counts, cleanupOk, error}  ──▶
package shard
