// Package brand implements branded ids: 64-bit, time-ordered identifiers with
// a type brand in their text form, one-to-one and order-preserving with Redis
// stream ids.
//
// # Layout
//
// An ID is 64 bits, most significant first:
//
//	42 bits  milliseconds since Epoch (2024-01-01T00:00:00Z)
//	10 bits  node (0..1023)
//	12 bits  sequence within the millisecond (0..4095)
//
// The brand (EVT, JOB, …) is not in the 64 bits. It is the type tag of the
// text form, "<BRAND>_" followed by 13 characters of upper-case Crockford
// base32, zero-padded, so that string order equals numeric order within a
// brand. The first of the 13 characters carries only 4 bits and is therefore
// at most 'F'.
//
// The Redis stream id of an ID is "<unix ms>-<node*4096 + sequence>", that is
// the high 42 bits plus Epoch, a dash, and the low 22 bits. The mapping is a
// bijection between all IDs and the Redis ids whose milliseconds lie in
// [Epoch, Epoch+2^42) and whose sequence is below 2^22, and it preserves
// order: Redis orders stream ids exactly as IDs order numerically.
//
// # Promises
//
// Parsing is strict and total: every input either yields the one ID whose
// canonical form it is, or an error wrapping ErrMalformed, ErrBrand or
// ErrRange. Nothing panics on input. A Minter never returns an ID at or below
// one it returned before or was told about (Observe, MintAbove), whatever the
// clock does.
package brand
