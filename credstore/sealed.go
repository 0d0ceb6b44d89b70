package credstore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// KeySecret is the secret that holds a shared store's key: 64 hex digits
// (or the same 32 bytes in standard base64), in the secrets file
// (--secrets-file). MST never gives it to a client or a worker: only the
// process that opens the store reads it.
const KeySecret = "MST_CREDENTIALS_KEY"

// NewKey returns a fresh random key for KeySecret, as 64 hex digits.
func NewKey() string {
	raw := make([]byte, keyBytes)
	rand.Read(raw)
	return hex.EncodeToString(raw)
}

// ParseKey returns the cipher of a key written as NewKey writes it (or as
// 32 bytes in standard base64). The error never shows the value.
func ParseKey(s string) (cipher.AEAD, error) {
	s = strings.TrimSpace(s)
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != keyBytes {
		raw, err = base64.StdEncoding.DecodeString(s)
	}
	if err != nil || len(raw) != keyBytes {
		return nil, fmt.Errorf("%s must hold %d random bytes as %d hex digits (or in base64), and holds something else; make one with `mst auth new-key`", KeySecret, keyBytes, 2*keyBytes)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// GrantObject is the name a store gives server's sealed grant: the hex
// SHA-256 of the name with the .grant extension, the same for every
// store, so any name makes a short, safe object name.
func GrantObject(server string) string { return fileBase(server) + grantExt }

// Seal encrypts g for the object name, as the local store does its files:
// AES-256-GCM, authenticated with the name, so a sealed grant moved to
// another server's name does not open.
func Seal(aead cipher.AEAD, name string, g Grant) ([]byte, error) { return seal(aead, name, g) }

// Unseal decrypts what Seal made for name; why says what is wrong with it
// ("is damaged, or was encrypted with another key than this store's"),
// for a DamagedError.
func Unseal(aead cipher.AEAD, name string, data []byte) (g Grant, why string) {
	return unseal(aead, name, data)
}
