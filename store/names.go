package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mst-eval/mst/transcript"
)

// How a key becomes a file name.
//
// A transcript lives at transcripts/VARIANT/CASE.tN.json. A variant name
// or case id made only of lower-case ASCII letters, digits, "-", "_" and
// "." (not first or last), short enough, and not a name Windows keeps for
// a device (con, nul, com1, ...), is used as it is: such a name means the
// same on every file system. Any other is escaped, cut to fit, and marked
// with "~" and a hash of the exact id:
//
//	Weather Q1  ->  Weather%20Q1~3f9c0a1b2d4e
//
// The escape keeps ASCII letters, digits, "-", "_" and "." and writes every
// other byte as %XX, so a name holds no separator, control character or
// byte that Windows or macOS refuse or fold; the hash keeps apart ids that
// differ only in case (file systems of macOS and Windows do not) and ids
// whose names were cut. Every name is at most maxName bytes, well under
// the 255 of common file systems.
//
// A name that was not cut gives its id back. One that was cut does not:
// its transcript, which holds the key, says which it is (see walk).
//
// Runs stored by older versions named files url.PathEscape(id), with "."
// and ".." as %2E, and split names over 255 bytes into folders (see
// legacyPath); they are read where they are and never renamed.
const (
	maxName = 200
	hashLen = 12
	mark    = '~'
)

// devices are the names Windows keeps for devices, in any case and
// whatever follows a first ".".
var devices = map[string]bool{
	"con": true, "prn": true, "aux": true, "nul": true,
	"com0": true, "com1": true, "com2": true, "com3": true, "com4": true,
	"com5": true, "com6": true, "com7": true, "com8": true, "com9": true,
	"lpt0": true, "lpt1": true, "lpt2": true, "lpt3": true, "lpt4": true,
	"lpt5": true, "lpt6": true, "lpt7": true, "lpt8": true, "lpt9": true,
}

// plain says whether id is used as its own file name (before suffix).
func plain(id, suffix string) bool {
	if id == "" || len(id)+len(suffix) > maxName || id[0] == '.' || id[len(id)-1] == '.' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	base, _, _ := strings.Cut(id, ".")
	return !devices[base]
}

// keep says whether the escape keeps byte c as it is at position i.
func keep(c byte, i int) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '_' || c == '.' && i > 0
}

func idHash(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])[:hashLen]
}

// fileName is the name of id, with suffix after it, in the current layout.
func fileName(id, suffix string) string {
	if plain(id, suffix) {
		return id + suffix
	}
	room := maxName - len(suffix) - 1 - hashLen
	// "nul.txt" names a device on Windows as "nul" does: escaping its first
	// letter makes it a name.
	base, _, dot := strings.Cut(id, ".")
	device := dot && devices[strings.ToLower(base)]
	b := make([]byte, 0, maxName)
	whole := 0 // the length of b up to the last whole character
	for i := 0; i < len(id); i++ {
		c := id[i]
		if utf8.RuneStart(c) {
			whole = len(b)
		}
		if keep(c, i) && !(device && i == 0) {
			if len(b)+1 > room {
				b = b[:whole] // cut between characters, not inside one
				break
			}
			b = append(b, c)
			continue
		}
		if len(b)+3 > room {
			b = b[:whole]
			break
		}
		b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
	}
	b = append(b, mark)
	b = append(b, idHash(id)...)
	return string(append(b, suffix...))
}

// trialSuffix ends the name of a case's transcript.
func trialSuffix(n int) string { return ".t" + strconv.Itoa(n) + ".json" }

// transcriptPath is where the transcript of k lives, relative to the run
// folder, in the current layout.
func transcriptPath(k transcript.Key) string {
	return transcriptsDir + "/" + fileName(k.Variant, "") + "/" + fileName(k.Case, trialSuffix(k.Trial))
}

// idOf reads an id back from its name: ok says it is the name fileName
// gives that id; cut says it may be a name that was cut, whose id only the
// file holds.
func idOf(name, suffix string) (id string, ok, cut bool) {
	i := strings.LastIndexByte(name, mark)
	if i < 0 {
		return name, plain(name, suffix), false
	}
	h := name[i+1:]
	if len(h) != hashLen || strings.Trim(h, "0123456789abcdef") != "" {
		return "", false, false
	}
	id, err := url.PathUnescape(name[:i])
	if err == nil && fileName(id, suffix) == name+suffix {
		return id, true, false
	}
	return "", false, true
}

// trialOf splits a transcript's file name into the case's name and the
// trial.
func trialOf(file string) (name string, trial int, ok bool) {
	file, ok = strings.CutSuffix(file, ".json")
	i := strings.LastIndex(file, ".t")
	if !ok || i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(file[i+2:])
	if err != nil || n < 1 || strconv.Itoa(n) != file[i+2:] {
		return "", 0, false
	}
	return file[:i], n, true
}

// keyOf reads a key back from a transcript's path relative to the
// transcripts folder. ok says rel is the path of k; cut says rel has the
// shape of a path whose names were cut, so only the file can say its key.
func keyOf(rel string) (k transcript.Key, ok, cut bool) {
	variant, file, found := strings.Cut(filepath.ToSlash(rel), "/")
	if !found || strings.Contains(file, "/") {
		return transcript.Key{}, false, false
	}
	name, n, found := trialOf(file)
	if !found {
		return transcript.Key{}, false, false
	}
	v, okV, cutV := idOf(variant, "")
	c, okC, cutC := idOf(name, trialSuffix(n))
	if okV && okC {
		return transcript.Key{Case: c, Variant: v, Trial: n}, true, false
	}
	return transcript.Key{}, false, (okV || cutV) && (okC || cutC)
}

// readKey reads only the key of the transcript in the file at path: the
// fields before it are few and short, so it stops long before the end.
func readKey(path string) (transcript.Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return transcript.Key{}, err
	}
	defer f.Close()
	return decodeKey(f)
}

// decodeKey reads only the key of the transcript rd holds.
func decodeKey(rd io.Reader) (transcript.Key, error) {
	d := json.NewDecoder(rd)
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return transcript.Key{}, errors.New("not a JSON object")
	}
	var k transcript.Key
	var seen int
	for seen < 3 && d.More() {
		tok, err := d.Token()
		if err != nil {
			return transcript.Key{}, err
		}
		var dst any
		switch tok {
		case "case":
			dst = &k.Case
		case "variant":
			dst = &k.Variant
		case "trial":
			dst = &k.Trial
		default:
			dst = new(json.RawMessage)
			seen--
		}
		if err := d.Decode(dst); err != nil {
			return transcript.Key{}, err
		}
		seen++
	}
	if seen < 3 {
		return transcript.Key{}, errors.New("no key")
	}
	return k, nil
}

// The layout of older versions: url.PathEscape, "." and ".." as %2E, and a
// name over 255 bytes split into folders of at most 200 bytes, each but
// the last ending in "%".
const (
	legacyMaxName  = 255
	legacyChunkLen = 200
)

// legacyPath is where an older version put the transcript of k.
func legacyPath(k transcript.Key) string {
	return transcriptsDir + "/" + legacySegments(legacyEscape(k.Variant), "") + "/" + legacySegments(legacyEscape(k.Case), trialSuffix(k.Trial))
}

func legacyEscape(s string) string {
	e := url.PathEscape(s)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

func legacySegments(e, suffix string) string {
	if len(e)+len(suffix) <= legacyMaxName {
		return e + suffix
	}
	var b strings.Builder
	for len(e) > legacyChunkLen {
		cut := legacyChunkLen
		if i := strings.LastIndexByte(e[cut-2:cut], '%'); i >= 0 {
			cut = cut - 2 + i
		}
		b.WriteString(e[:cut])
		b.WriteString("%/")
		e = e[cut:]
	}
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	b.WriteString(e)
	b.WriteString(suffix)
	return b.String()
}

// legacyKeyOf reads a key back from a path of the older layout.
func legacyKeyOf(rel string) (transcript.Key, bool) {
	parts := strings.Split(filepath.ToSlash(rel), "/")
	join := func() (string, bool) {
		var b strings.Builder
		for len(parts) > 0 {
			p := parts[0]
			parts = parts[1:]
			if s, ok := strings.CutSuffix(p, "%"); ok {
				b.WriteString(s)
				continue
			}
			b.WriteString(p)
			return b.String(), true
		}
		return "", false
	}
	variant, ok1 := join()
	file, ok2 := join()
	if !ok1 || !ok2 || len(parts) > 0 {
		return transcript.Key{}, false
	}
	name, n, ok := trialOf(file)
	if !ok {
		return transcript.Key{}, false
	}
	v, err1 := url.PathUnescape(variant)
	c, err2 := url.PathUnescape(name)
	if err1 != nil || err2 != nil {
		return transcript.Key{}, false
	}
	k := transcript.Key{Case: c, Variant: v, Trial: n}
	if legacyPath(k) != transcriptsDir+"/"+filepath.ToSlash(rel) {
		return transcript.Key{}, false
	}
	return k, true
}
