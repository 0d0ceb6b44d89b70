// Package shard runs mst.shard/v1 on both of its sides: the worker (the
// one trial loop every runner uses, local included, and the grade worker)
// and the coordinator's Serve, which holds the limits, tokens and secrets
// for every worker of a run. The messages themselves are package protocol.
//
// A shard is the trials of whole cases. The worker writes only protocol
// lines to its stdout; its logs go to stderr.
package shard
