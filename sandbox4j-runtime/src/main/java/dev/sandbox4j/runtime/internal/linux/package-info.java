/**
 * Not API: may change in any release. The Linux kernel as the engine uses it, with no idea of a
 * sandbox: system calls through the FFM API, one class per job over one link to libc (Libc):
 * openat2 and the *at calls on descriptors (NativeFs), content, ownership, times and links by
 * descriptor (DescriptorCalls), copies with clones and holes (FileCopy), mounts and idmapped mounts
 * (MountCalls), overlay whiteouts and opaque directories (OverlayMarks), a file thread's identity
 * (ThreadCredentials), walks that never leave a tree (Beneath, Trees), cgroups v1/v2 and the
 * freezer (Cgroups, Freezer), host limits (HostLimits), loop-mounted ext4 disks (LoopDisk), mount
 * and kernel facts (Mounts), user namespaces for idmapped mounts (UserNamespaces).
 *
 * <p>Non-goals: policy. What a sandbox may do is decided above; this package does what it is told
 * and reports errors with the path and errno.
 */
package dev.sandbox4j.runtime.internal.linux;
