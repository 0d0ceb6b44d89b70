package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/mst-eval/mst/grade"
	"github.com/mst-eval/mst/internal/ground/atomicfile"
	"github.com/mst-eval/mst/internal/provider"
	"github.com/mst-eval/mst/protocol"
	"github.com/mst-eval/mst/secrets"
	"github.com/mst-eval/mst/store"
	"github.com/mst-eval/mst/transcript"
)

// GradeWorker grades the stored transcripts of one grade shard (mst
// grade-shard): the runners' second kind of worker. It loads no dataset and
// starts no client or server. Its judges reach their models through
// Providers, with the keys the coordinator sends in its tokens message
// (only the judges' keys: a collect worker never gets one, and a grade
// worker gets no other). Before grading a trial it asks for room under the
// eval's limits.providers for its judges' providers (acquire), writes the
// grade to Results as GradePath names it, and reports it (graded).
type GradeWorker struct {
	Providers *provider.Registry
	// Graders are the grader kinds this process has (built in and its
	// plugins'); nil means the built-in ones. Plugins are its plugin
	// versions, which hello reports.
	Graders *grade.Registry
	Plugins PluginVersions
	// Results is the folder the worker writes grades to; the coordinator
	// fetches them back from there.
	Results string
	// Secrets receives the keys the coordinator sends; every one is
	// redacted from what the worker writes.
	Secrets    *secrets.Set
	Logger     *slog.Logger
	MSTVersion string
	// Heartbeat is how often the worker sends a heartbeat (HeartbeatEvery
	// when zero).
	Heartbeat time.Duration
	// ImageDigest identifies the machine image the worker runs in, when
	// its runner said (ImageDigestEnv); hello carries it.
	ImageDigest string
}

// Run grades the bundle's trials, reading their transcripts from
// bundleDir, and speaks the protocol on in and out like Worker.Run. It
// returns when every trial is graded, or when a cancel arrived and the
// grades in flight ended; a trial whose grade was cut short is reported
// without a path and stays ungraded.
func (w *GradeWorker) Run(ctx context.Context, b *Bundle, bundleDir string, in io.Reader, out io.Writer) error {
	if err := b.check(); err != nil {
		return fmt.Errorf("the bundle: %w", err)
	}
	if b.Work != WorkGrade {
		return fmt.Errorf("the bundle in %s runs trials (work %q); mst grade-shard grades only: a runner starts mst collect for it", bundleDir, b.Work)
	}
	if w.Secrets == nil {
		w.Secrets = secrets.New()
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	byCase, providers, err := gradeWorkGraders(w.Graders, b.Grade)
	if err != nil {
		return fmt.Errorf("the bundle's graders: %w", err)
	}
	enc := protocol.NewEncoder(out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The grade worker shares the collect worker's handling of the
	// coordinator's messages: grants, tokens and cancel.
	host := &Worker{Logger: w.Logger, Heartbeat: w.Heartbeat, Secrets: w.Secrets}
	r := &workerRun{w: host, b: b, enc: enc, grants: map[int64]chan struct{}{}, accepted: make(chan struct{})}
	r.tokens = newWorkerTokens(w.Secrets, w.Logger, "", func(names []string, _ bool) {
		enc.Write(&protocol.NeedTokens{Names: names})
	})
	defer r.tokens.close()
	go r.readCoordinator(in, cancel)
	if err := enc.Write(&protocol.Hello{Protocol: protocol.Protocol, MSTVersion: w.MSTVersion, Shard: b.Shard, ImageDigest: w.ImageDigest, OS: runtime.GOOS, Arch: runtime.GOARCH, Plugins: w.Plugins.For(slices.Collect(maps.Keys(b.Plugins)))}); err != nil {
		return fmt.Errorf("writing hello: %w", err)
	}
	hbCtx, stopHB := context.WithCancel(context.Background())
	defer stopHB()
	go r.heartbeat(hbCtx)
	select {
	case <-r.accepted:
	case <-ctx.Done():
	}
	select {
	case <-r.accepted:
	default:
		stopHB()
		err := fmt.Errorf("the coordinator did not accept this worker (%s); nothing was graded", r.cancelled())
		enc.Write(&protocol.Done{Error: err.Error(), CleanupOK: r.tokens.close() == nil})
		return err
	}
	judges := &grade.Judges{Providers: w.Providers, Key: w.Secrets.Get}
	redact := secrets.NewRedactor(w.Secrets)
	g := &gradeRun{w: w, r: r, dir: bundleDir, byCase: byCase, providers: providers, judges: judges, redact: redact}
	conc := b.Grade.Concurrency
	if conc <= 0 {
		conc = runtime.GOMAXPROCS(0)
		if len(providers) > 0 {
			conc = max(conc, 4) // judges wait on their models
		}
	}
	each(ctx, slices.Values(b.Grade.Trials), conc, func(k transcript.Key) { g.trial(ctx, k) })
	stopHB()
	cleanup := r.tokens.close()
	var counts transcript.Counts
	r.mu.Lock()
	counts = r.tally
	r.mu.Unlock()
	counts.Planned = len(b.Grade.Trials)
	return enc.Write(&protocol.Done{Counts: counts, CleanupOK: cleanup == nil})
}

type gradeRun struct {
	w         *GradeWorker
	r         *workerRun
	dir       string
	byCase    map[string][]grade.Grader
	providers map[string][]string
	judges    *grade.Judges
	redact    *secrets.Redactor
}

// trial grades one trial and reports it. A trial that never got room (the
// run was cancelled first) is not reported: it stays ungraded.
func (g *gradeRun) trial(ctx context.Context, k transcript.Key) {
	id, skip, err := g.r.acquireRoom(ctx, k, g.providers[k.Case], nil)
	if err != nil {
		return
	}
	start := time.Now()
	report := func(path string) {
		g.r.enc.Write(&protocol.Graded{Acquire: id, Key: k, Path: path, DurationMs: ms(time.Since(start))})
	}
	if skip != "" {
		g.w.Logger.Warn("the coordinator refused a trial to grade", "trial", k.String(), "why", skip)
		report("")
		return
	}
	g.r.inFlight.Add(1)
	defer g.r.inFlight.Add(-1)
	where := filepath.Join(g.dir, filepath.FromSlash(GradeTranscript(k)))
	data, err := os.ReadFile(where)
	var t *transcript.Transcript
	if err == nil {
		t, err = store.DecodeTranscript(data, where)
	}
	if err == nil && t.Key != k {
		err = fmt.Errorf("%s holds the transcript of %s", where, t.Key)
	}
	if err != nil {
		g.w.Logger.Error("reading a transcript to grade", "trial", k.String(), "err", err)
		report("")
		return
	}
	tg := grade.TrialContext(ctx, t, g.byCase[k.Case], g.judges)
	if ctx.Err() != nil {
		// A judge cut short by the cancel gave no verdict: that is no
		// grade, and the trial is graded again on resume.
		report("")
		return
	}
	out, err := json.Marshal(tg)
	if err == nil {
		err = atomicfile.Write(filepath.Join(g.w.Results, filepath.FromSlash(GradePath(k))), g.redact.Bytes(out))
	}
	if err != nil {
		g.w.Logger.Error("writing a grade", "trial", k.String(), "err", err)
		report("")
		return
	}
	g.r.mu.Lock()
	g.r.tally.Add(t.Outcome.Status)
	g.r.mu.Unlock()
	g.r.done.Add(1)
	report(GradePath(k))
}

// gradeWorkGraders parses a grade bundle's graders: each case gets the
// eval-level graders and then its own. providers lists, by case, the model
// providers its judges use, whose room a trial of the case takes.
func gradeWorkGraders(reg *grade.Registry, w *GradeWork) (byCase map[string][]grade.Grader, providers map[string][]string, err error) {
	global, err := grade.ParseAllIn(reg, w.Graders)
	if err != nil {
		return nil, nil, fmt.Errorf("graders%w", err)
	}
	byCase = make(map[string][]grade.Grader, len(w.Cases))
	providers = map[string][]string{}
	var errs []error
	for _, c := range w.Cases {
		own, err := grade.ParseAllIn(reg, c.Expect)
		if err != nil {
			errs = append(errs, fmt.Errorf("case %q: expect%w", c.ID, err))
			continue
		}
		gs := append(slices.Clip(global), own...)
		byCase[c.ID] = gs
		for _, in := range grade.Judged(gs) {
			if p := provider.Of(in.Model); p != "" && !slices.Contains(providers[c.ID], p) {
				providers[c.ID] = append(providers[c.ID], p)
			}
		}
	}
	return byCase, providers, errors.Join(errs...)
}
