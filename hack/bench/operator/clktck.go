package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"
)

// atClkTck is the auxiliary vector entry (AT_CLKTCK in <elf.h>) by which
// the kernel tells a process the clock tick rate that /proc/<pid>/stat
// counts CPU time in: what sysconf(_SC_CLK_TCK) returns.
const atClkTck = 17

// atNull ends the auxiliary vector.
const atNull = 0

// clockTicks returns the clock ticks a second of the CPU times in
// /proc/<pid>/stat, read from this process's auxiliary vector.
func clockTicks() (int64, error) {
	const path = "/proc/self/auxv"
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("reading the clock tick rate (AT_CLKTCK) of /proc/<pid>/stat's CPU times: %w", err)
	}
	hz, err := auxvValue(data, atClkTck)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: the kernel did not give the clock tick rate of /proc/<pid>/stat's CPU times", path, err)
	}
	if hz == 0 || hz > uint64(time.Second) {
		return 0, fmt.Errorf("%s: AT_CLKTCK (type %d) is %d, not a clock tick rate", path, atClkTck, hz)
	}
	return int64(hz), nil
}

// auxvValue returns the value of the entry of type typ in auxv, an
// auxiliary vector as /proc/<pid>/auxv gives it on 64-bit Linux:
// native-endian uint64 pairs (type, value), ending with type AT_NULL.
func auxvValue(auxv []byte, typ uint64) (uint64, error) {
	const entry = 16
	if len(auxv)%entry != 0 {
		return 0, fmt.Errorf("the auxiliary vector is %d bytes, not a whole number of %d-byte (type, value) entries", len(auxv), entry)
	}
	for i := 0; i < len(auxv); i += entry {
		t := binary.NativeEndian.Uint64(auxv[i:])
		if t == atNull {
			break
		}
		if t == typ {
			return binary.NativeEndian.Uint64(auxv[i+8:]), nil
		}
	}
	return 0, fmt.Errorf("the auxiliary vector has no entry of type %d", typ)
}

// ticksToDuration converts a CPU time in clock ticks (hz a second) to a
// duration.
func ticksToDuration(ticks, hz int64) time.Duration {
	return time.Duration(ticks) * time.Second / time.Duration(hz)
}
