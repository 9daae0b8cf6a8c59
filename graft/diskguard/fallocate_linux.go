package diskguard

import "syscall"

// fallocate allocates size bytes to the file (mode 0: the size grows too).
func fallocate(fd uintptr, size int64) error {
	return syscall.Fallocate(int(fd), 0, 0, size)
}
