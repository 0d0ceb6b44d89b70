package transcript

import (
	"fmt"
	"time"
)

// RunVersion is the version of the run.json format written by this MST.
const RunVersion = 1

// Collect states of a run.
const (
	CollectRunning  = "running"
	CollectComplete = "complete"
	CollectPartial  = "partial"
	// CollectErrored: every planned trial has a transcript, and not one
	// could be graded: each errored. The run says nothing about its
	// variants; "complete" would say it does.
	CollectErrored = "errored"
	// CollectInterrupted is what a reader shows for a run whose record
	// says running while no process owns it any more: its coordinator died
	// (a crash, a kill, a full disk) before it could say how the run ended.
	// It is never written: the stored record still says running.
	CollectInterrupted = "interrupted"
)

// Owner is the process that writes a run: the run's coordinator.
type Owner struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
}

func (o Owner) String() string {
	s := fmt.Sprintf("pid %d on host %s", o.PID, o.Host)
	if !o.Started.IsZero() {
		s += ", since " + o.Started.Local().Format("2006-01-02 15:04:05")
	}
	return s
}

// Run is run.json: what a run is and how far it got.
type Run struct {
	Kind       string `json:"kind"` // always "mst.run"
	Version    int    `json:"version"`
	ID         string `json:"id"`
	Eval       string `json:"eval"`
	ConfigFile string `json:"configFile"`
	ConfigHash string `json:"configHash"`
	// ConfigPath is the config file's absolute path, so --resume finds it
	// from any folder.
	ConfigPath string     `json:"configPath,omitempty"`
	MSTVersion string     `json:"mstVersion"`
	Started    time.Time  `json:"started"`
	Ended      time.Time  `json:"ended,omitzero"`
	Runner     RunnerInfo `json:"runner"`
	// Selection records the flags that narrowed the eval for this run.
	Selection Selection `json:"selection,omitzero"`
	Variants  []string  `json:"variants"`
	Cases     int       `json:"cases"`
	Trials    int       `json:"trialsPerCase"`
	Counts    Counts    `json:"counts"`
	Collect   string    `json:"collect"`
	// Resumes counts how often the run was resumed.
	Resumes int `json:"resumes,omitempty"`
	// NoGrade is true for a run collected with --no-grade: MST grades
	// none of its trials (a resume neither) until mst grade does.
	NoGrade bool `json:"noGrade,omitempty"`
	// Note says why a run is partial, when it is.
	Note string `json:"note,omitempty"`
	// Stopped lists the variants the latest attempt stopped: their first
	// trials all errored with one provider or client cause, so the rest
	// were skipped. A resume runs the skipped trials again.
	Stopped []StoppedVariant `json:"stopped,omitempty"`
	// Owner is the process that last wrote the run (its latest attempt).
	Owner *Owner `json:"owner,omitempty"`
}

// RunnerInfo records where a run ran.
type RunnerInfo struct {
	Name    string            `json:"name"`
	Options map[string]string `json:"options,omitempty"`
	Shards  int               `json:"shards"`
	Keep    string            `json:"keep,omitempty"`
	// Machines has one entry per shard that ran, latest attempt last.
	Machines []Machine `json:"machines,omitempty"`
	// ShardTrials is, for a run of more than one shard, how many of the
	// run's planned trials the split gives each shard at the latest
	// attempt's shard count, by shard index: a shard given none has 0 here
	// and no machine.
	ShardTrials []int `json:"shardTrials,omitempty"`
	// Split is how the first attempt put the run's cases on its shards;
	// a resume with as many shards puts each case it still runs there.
	// Nil in a run.json written before MST recorded it: read it with
	// RecordedSplit.
	Split *Split `json:"split,omitempty"`
}

// Split methods: how a run's cases were put on its shards.
const (
	// SplitDeal orders the cases by trials (most first), then by
	// fnv64a(case id), then by id, and deals each to the shard with the
	// fewest trials so far (the lowest index among equals). It depends on
	// nothing but the case ids, their trial counts and the shard count.
	SplitDeal = "fnv64a-deal"
	// SplitMod puts a case on shard fnv64a(case id) mod shards: how every
	// run recorded before SplitDeal was split.
	SplitMod = "fnv64a-mod"
)

// Split records a run's split without listing its cases: the method,
// applied to the run's stored cases and trials per case over Shards,
// gives every case's shard again. Digest is a check of that result (see
// run.CaseShards), so a resume knows when it cannot be reproduced.
type Split struct {
	Method string `json:"method"`
	Shards int    `json:"shards"`
	Digest string `json:"digest,omitempty"`
}

// RecordedSplit is the run's split: Split, or for a run.json written
// before MST recorded it, the rule such runs were split by (SplitMod over
// the recorded shard count).
func (r RunnerInfo) RecordedSplit() Split {
	if r.Split != nil {
		return *r.Split
	}
	return Split{Method: SplitMod, Shards: max(r.Shards, 1)}
}

// Machine records one shard's machine and how the shard ended.
type Machine struct {
	Shard int    `json:"shard"`
	ID    string `json:"id"`
	// Image is what the machine ran, pinned by digest: the image digest
	// the worker reported at hello, else what the runner knows of it;
	// NAME@sha256:… for a container image (the registry's digest when the
	// image came from one, else the local image id).
	Image      string `json:"image,omitempty"`
	MSTVersion string `json:"mstVersion,omitempty"`
	// ClientVersions are the versions the worker reported at hello: of
	// the programs the shard's variants run, by client name (or
	// CLIENT@VARIANT when a client's variants run different versions).
	ClientVersions map[string]string `json:"clientVersions,omitempty"`
	OS             string            `json:"os,omitempty"`
	// Trials is how many trials the shard was given.
	Trials int `json:"trials"`
	// Ended is done, failed, lost or cancelled.
	Ended string `json:"ended"`
	Error string `json:"error,omitempty"`
	// CleanupOK is false when the worker could not close a client.
	CleanupOK bool `json:"cleanupOk"`
	// Attempt counts from 1: a resumed run's shards are attempt 2 and on.
	Attempt int `json:"attempt,omitempty"`
	// Kept says the machine was kept after its shard (keep=failed or
	// always); mst runner cleanup RUN removes it.
	Kept bool `json:"kept,omitempty"`
}

// Selection records the subset of the eval a run was asked for.
type Selection struct {
	Variants []string `json:"variants,omitempty"`
	Cases    []string `json:"cases,omitempty"`
	Trials   int      `json:"trials,omitempty"`
	Limit    int      `json:"limit,omitempty"`
}

// Counts counts a run's trials by how they ended. Missing trials have no
// transcript.
type Counts struct {
	Planned   int `json:"planned"`
	Answered  int `json:"answered"`
	NoAnswer  int `json:"noAnswer"`
	TimedOut  int `json:"timedOut"`
	Errored   int `json:"errored"`
	Cancelled int `json:"cancelled"`
	Skipped   int `json:"skipped,omitempty"`
	Missing   int `json:"missing"`
}

// Add counts one transcript's outcome.
func (c *Counts) Add(status string) {
	switch status {
	case Answered:
		c.Answered++
	case NoAnswer:
		c.NoAnswer++
	case TimedOut:
		c.TimedOut++
	case Errored:
		c.Errored++
	case Cancelled:
		c.Cancelled++
	case Skipped:
		c.Skipped++
	}
}

// Done is the number of trials that have a transcript.
func (c Counts) Done() int {
	return c.Answered + c.NoAnswer + c.TimedOut + c.Errored + c.Cancelled + c.Skipped
}

// StoppedVariant is a variant whose remaining trials a run skipped.
type StoppedVariant struct {
	Variant string `json:"variant"`
	// Cause is the cause its first trials errored with: provider or client.
	Cause string `json:"cause"`
	// Detail is the first of those trials' error message: its first line,
	// redacted and cut short.
	Detail string `json:"detail,omitempty"`
	// Reason is the sentence each skipped trial's transcript holds as its
	// outcome's detail.
	Reason string `json:"reason"`
}
