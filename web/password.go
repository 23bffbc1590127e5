package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Console passwords are hashed with argon2id and stored as PHC strings:
//
//	$argon2id$v=19$m=19456,t=2,p=1$<salt, base64>$<key, base64>
//
// The parameters are OWASP's first recommended argon2id configuration (19 MiB, 2 passes, one
// lane): about 25 ms per hash on a server core. 64 MiB would be stronger per guess, but every
// sign-in allocates m, and a burst of sign-ins (sign-in is unauthenticated) would cost the
// gateway process gigabytes; throttling (Sessions.Throttled) bounds online guessing anyway.
// CheckPassword reads the parameters from the stored string, so they can be raised later
// without invalidating existing hashes.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonSaltLen = 16
	argonKeyLen  = 32
)

// Bounds on the parameters CheckPassword accepts from a stored hash, so a corrupted row cannot
// make one sign-in allocate gigabytes or spin for minutes.
const (
	maxArgonMemory  = 256 * 1024 // KiB
	maxArgonTime    = 16
	maxArgonThreads = 16
)

// dummyHash is a hash of a random password nobody knows, with the current parameters: a
// sign-in for an unknown email checks against it, so it takes as long as a wrong password and
// timing does not tell which emails have accounts.
const dummyHash = "$argon2id$v=19$m=19456,t=2,p=1$njn86Den6xys8KjoDrnDzQ$wyZ1dwTBJSBGzxDSWOmJS4XMCLlw34x/ZM5x5O48VjE"

// HashPassword returns the argon2id PHC string of pw with a fresh random salt. Callers validate
// pw first (app.ValidPassword).
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// CheckPassword reports whether pw matches the PHC string phc, comparing in constant time. It
// returns an error (and false) when phc is not an argon2id hash this package can check.
func CheckPassword(phc, pw string) (bool, error) {
	h, err := parsePHC(phc)
	if err != nil {
		return false, err
	}
	key := argon2.IDKey([]byte(pw), h.salt, h.time, h.memory, h.threads, uint32(len(h.key)))
	return subtle.ConstantTimeCompare(key, h.key) == 1, nil
}

type argonHash struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

var errBadHash = errors.New("malformed password hash: want $argon2id$v=19$m=...,t=...,p=...$salt$key")

func parsePHC(phc string) (argonHash, error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" || parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return argonHash{}, errBadHash
	}
	params := strings.Split(parts[3], ",")
	if len(params) != 3 {
		return argonHash{}, errBadHash
	}
	var h argonHash
	var vals [3]uint64
	for i, name := range []string{"m=", "t=", "p="} {
		v, ok := strings.CutPrefix(params[i], name)
		if !ok || v == "" || v[0] == '+' {
			return argonHash{}, errBadHash
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return argonHash{}, errBadHash
		}
		vals[i] = n
	}
	if vals[2] < 1 || vals[2] > maxArgonThreads || vals[1] < 1 || vals[1] > maxArgonTime ||
		vals[0] < 8*vals[2] || vals[0] > maxArgonMemory {
		return argonHash{}, fmt.Errorf("password hash parameters m=%d,t=%d,p=%d are out of bounds", vals[0], vals[1], vals[2])
	}
	h.memory, h.time, h.threads = uint32(vals[0]), uint32(vals[1]), uint8(vals[2])
	var err error
	if h.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil || len(h.salt) < 8 {
		return argonHash{}, errBadHash
	}
	if h.key, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil || len(h.key) < 16 || len(h.key) > 64 {
		return argonHash{}, errBadHash
	}
	return h, nil
}
