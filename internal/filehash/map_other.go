//go:build !unix

package filehash

// Map reads path where files cannot be mapped (see the unix version).
func Map(path string) (data []byte, sum string, release func(), err error) {
	data, sum, err = Read(path)
	return data, sum, func() {}, err
}
