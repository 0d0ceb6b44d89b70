// Package protocol holds the messages of mst.shard/v1, the protocol a
// coordinator and its workers speak: one JSON object per line, each with
// a "type", over the channel a runner opened (a pipe, ssh, docker exec,
// kubectl exec). Encoder writes them; Decoder and Decode read them and
// refuse a line that is not one of these messages. Unknown fields are
// ignored; an unknown type is an error (ErrUnknownMessage).
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
//
// The messages are part of MST's public API: from 2.0.0-rc.1 they change
// only in ways an older worker or coordinator can read, and a breaking
// change waits for a new protocol name. docs/protocol.md describes the
// exchange, message by message.
package protocol
