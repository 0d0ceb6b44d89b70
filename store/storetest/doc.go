// Package storetest is the conformance suite of result stores: every
// store.Store passes Run, the way every fs.FS passes fstest.TestFS and
// every restic backend passes restic's backend tests.
//
//	func TestDir(t *testing.T) {
//		t.Parallel()
//		storetest.Run(t, func(t *testing.T) store.Store {
//			return store.Dir{Root: t.TempDir(), Eval: "weather"}
//		})
//	}
//
// Run runs its tests in parallel and calls newStore once for each, so
// newStore must return an empty store of its own every time. What the
// suite cannot see through the interfaces (every byte a store keeps, a
// write torn by a crash, runs stored by older versions) an implementation
// checks in its own tests; WriteSecrets and CheckNoSecret help with the
// first.
package storetest
