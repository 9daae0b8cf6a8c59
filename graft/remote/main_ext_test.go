package remote_test

import (
	"os"
	"testing"

	"github.com/echostore/echostore/graft/remote"
	"github.com/echostore/echostore/graft/remote/drivers"
	"github.com/echostore/echostore/graft/remote/file"
	"github.com/echostore/echostore/graft/remote/s3"
)

func TestMain(m *testing.M) {
	os.Exit(remote.RunTests(m, remote.TestDrivers{
		All: drivers.All(),
		OpenFile: func(dir string) (remote.FileStoreForTest, error) {
			s, err := file.Open(dir)
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		S3Store: s3.NewStore,
	}))
}
