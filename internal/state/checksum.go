package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
)

// castagnoli is CRC-32C, the checksum of every record and of the manifest.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordCRC covers the form id as well as the JSON, so that a record that
// ends up under another key fails too.
func recordCRC(key, body []byte) uint32 {
	crc := crc32.Update(0, castagnoli, key)
	crc = crc32.Update(crc, castagnoli, []byte{0})
	return crc32.Update(crc, castagnoli, body)
}

// sealRecord is the stored value of a record: its checksum, then the JSON.
func sealRecord(key, body []byte) ([]byte, uint32) {
	crc := recordCRC(key, body)
	val := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(val, crc)
	copy(val[4:], body)
	return val, crc
}

// openRecord checks a stored value and returns its JSON and checksum.
func openRecord(key, val []byte) ([]byte, uint32, error) {
	if len(val) < 4 {
		return nil, 0, fmt.Errorf("the record of form %q is %d bytes, too short to hold its checksum", key, len(val))
	}
	stored, body := binary.BigEndian.Uint32(val), val[4:]
	if got := recordCRC(key, body); got != stored {
		return nil, 0, fmt.Errorf("the record of form %q fails its checksum (stored %08x, computed %08x)", key, stored, got)
	}
	return body, stored, nil
}

// manifestEntry is what the manifest keeps of one form: the checksum of its
// record and its generation (which a reset of a damaged record needs).
type manifestEntry struct {
	CRC uint32 `json:"crc"`
	Gen int    `json:"gen,omitempty"`
}

// manifest lists every form of a version 2 file.
type manifest map[string]manifestEntry

func sealManifest(m manifest) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	val := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(val, crc32.Checksum(body, castagnoli))
	copy(val[4:], body)
	return val, nil
}

func openManifest(val []byte) (manifest, error) {
	if val == nil {
		return nil, errors.New("its manifest (the list of forms with the checksums of their records) is missing")
	}
	if len(val) < 4 {
		return nil, errors.New("its manifest is too short to hold its checksum")
	}
	body := val[4:]
	if got, stored := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(val); got != stored {
		return nil, fmt.Errorf("its manifest fails its checksum (stored %08x, computed %08x)", stored, got)
	}
	m := manifest{}
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("its manifest: %w", err)
	}
	return m, nil
}
