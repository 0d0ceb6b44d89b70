// Package grade scores transcripts with deterministic graders and with
// LLM judges.
//
// A grader spec is a JSON object with exactly one key, the grader's name,
// whose value configures it:
//
//	{"answerContains": "12°C"}
//	{"answerContains": {"text": "oslo", "ignoreCase": true}}
//	{"answerMatches": "\\d+ ?°C"}
//	{"toolCalled": "get_forecast"}
//	{"toolCalled": {"tool": "get_forecast", "server": "weather", "arguments": {"city": "Oslo"}}}
//	{"toolNotCalled": "delete_file"}
//	{"toolNotCalled": {"tool": "delete_file", "server": "fs"}}
//	{"maxToolCalls": 5}
//	{"judge": {"rubric": "supported", "model": "anthropic/claude-sonnet-4-5"}}
//	{"judge": {"rubric": "correct", "reference": "12°C", "model": "offline", "scale": {"min": 0, "max": 10}}}
//	{"judge": {"criteria": "The answer is polite.", "model": "openai/gpt-5", "gate": false}}
//
// Specs come from the eval config's graders list and from each case's
// expect list; a trial is scored by both. Schema returns the JSON Schema of
// one spec, which the config's schema embeds.
//
// Parse checks a spec completely (types, unknown keys, regular expressions),
// so a deterministic Grader that parsed cannot fail later: Grade always
// returns a Result.
// Its errors name the path inside the spec but no file; the caller puts the
// file and the list index in front ("eval.yaml: graders[2]: ").
//
// Graders hold no state: Grade may be called from any goroutine and never
// changes the transcript. Trial applies a list of graders to one transcript
// and decides whether the trial passed. Only an answered trial can pass;
// no-answer and timed-out trials are graded and always fail (their results
// are kept, with the reason); errored, cancelled and skipped trials are not
// graded at all, because a trial that could not run properly is neither a
// pass nor a failure. docs/grading.md states the rule for users.
//
// A judge (judge.go) is a ContextGrader: it sends a rubric, the task and
// the answer or the tool calls (or both) to a model through the provider
// layer, using Judges for the providers, keys and limits, and records a
// Verdict (verdict, score on its Scale, rationale, and a hash of the
// judge's prompt, model and settings). TrialContext grades with judges;
// a judge that gives no verdict (the provider failed, the model refused
// or answered in another shape) makes the grade errored, never failed,
// unless the judge has gate: false. The built-in rubrics are in
// rubrics.go; the offline model (internal/builtin/provider/offline) has a documented
// judging rule, so judged evals run without a key.
//
// Graders that name tools implement Referrer. Before the first trial, the
// readiness check compares what they name with the tools the variant's
// servers list (CheckRefs), so a misspelt tool name is refused instead of
// passing or failing every trial.
//
// Graders compare in redacted space: the transcripts they read are stored
// with every secret value replaced by [redacted:NAME], so RedactSpec
// applies the same redaction to a spec's expected values before Parse.
// A grade made as the run goes and a regrade of the stored transcript
// then agree, and no Name or Detail shows a secret.
//
// Every grader kind is a Definition: the built-in ones (Builtins) and a
// plugin's (Plugged) sit in one Registry, which a process builds once and
// passes on; ParseIn and ParseAllIn parse with it, Parse and ParseAll with
// the built-in kinds alone. The records a grading makes (TrialGrade,
// Result, Verdict) are transcript's, so a store keeps them without
// compiling a grader.
package grade
