// Package datasettest is the conformance suite of dataset sources that
// plugins add (dataset.SourceDefinition), the way testing/fstest checks
// an fs.FS: a plugin's own tests call Run with its definition and a
// Fixture (options that load, in a folder, and the case ids they give),
// and the suite checks the contract dataset.SourceDefinition states:
//
//   - one of Load and LoadJSON is set (the suite calls that one "Load";
//     LoadJSON's objects are compared as the cases they decode to), and
//     the Options schema, when there is one, is a JSON
//     object that compiles as a JSON Schema and accepts the fixture's
//     options;
//   - Load returns the fixture's case ids, in order;
//   - every case passes MST's own checks: the cases, loaded through
//     dataset.LoadSpecs as `mst run` loads them, are the same as Load's
//     (ids present and unique, input not blank, known keys only, expect a
//     list of objects);
//   - loading twice gives the same cases;
//   - Load reads credentials only through SourceParams.Env, and only the
//     names in Credentials (the suite's Env fails on any other name);
//   - each of the fixture's Bad options makes Load return an error that
//     says something;
//   - Load with a context that is already cancelled returns promptly, an
//     error or its cases, within the test's deadline; it does not hang.
//     (This check runs last: a Load that hangs is left behind.)
//
// Call it from a test of the plugin's own module:
//
//	func TestSQLite(t *testing.T) {
//		dir := t.TempDir()
//		makeDB(t, filepath.Join(dir, "cases.db"))
//		datasettest.Run(t, sqlite.Definition(), datasettest.Fixture{
//			Options: json.RawMessage(`{"file": "cases.db"}`),
//			Dir:     dir,
//			IDs:     []string{"oslo", "tokyo"},
//			Bad:     []json.RawMessage{json.RawMessage(`{"file": "missing.db"}`)},
//		})
//	}
//
// The definition's Name may be short ("sqlite") or full; the suite
// registers it as it is. MST's own file formats (dataset.Formats) pass
// the same suite. Check is the same suite returning its problems
// as an error instead of failing a test, for tests of the suite itself.
package datasettest
