package dataset

import "github.com/mst-eval/mst/internal/ground/suggest"

func didYouMean(got string, candidates []string) string { return suggest.DidYouMean(got, candidates) }
