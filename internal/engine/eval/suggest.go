package eval

import "github.com/mst-eval/mst/internal/ground/suggest"

func didYouMean(got string, candidates []string) string { return suggest.DidYouMean(got, candidates) }

func hint(got string, candidates []string) string { return suggest.Hint(got, candidates) }
