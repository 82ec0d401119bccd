package mcpserver_test

import "os"

func osStat(p string) (os.FileInfo, error) { return os.Stat(p) }
