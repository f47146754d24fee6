"""The disk side of the disk-tier benchmark (disk_h200.py): how fast the
machine reads a checkpoint's files, and how much of them the page cache holds.

The GPU machine has 128 GiB of memory, so a 7 GB checkpoint just written (or
read once) sits in the page cache and a plain read measures memory, not the
disk. So: reads with O_DIRECT (the cache bypassed; aligned buffers from an
anonymous mmap, requests of whole MiB at offsets that are multiples of the
request), and buffered reads only after the files' pages were dropped
(fsync, then posix_fadvise(DONTNEED); /proc/sys/vm/drop_caches is tried too
and whether it worked is recorded). mincore() over a read-only mapping
(what util-linux's fincore does) says how many bytes of a file the cache
holds: the check that a drop worked, and the host memory a run used beyond
its own allocations (page cache is host memory too)."""
import ctypes
import mmap
import os
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")
MIB = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value


def checkpoint_files(model_dir):
    """The checkpoint's *.safetensors files, in name order (the shard order)."""
    return [os.path.join(model_dir, n) for n in sorted(os.listdir(model_dir))
            if n.endswith(".safetensors")]


def files_under(folder):
    """Every regular file under folder (none when it does not exist)."""
    out = []
    for root, _, names in os.walk(folder):
        out += [os.path.join(root, n) for n in names
                if os.path.isfile(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n))]
    return sorted(out)


def cached_bytes(path):
    """Bytes of `path` in the page cache (mincore over a PROT_READ mapping:
    it maps, it does not read). Linux reports this only for files the
    caller owns or may write (root here)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, _MAP_FAILED):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            if _libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            raw = vec.raw
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)
    resident = pages - raw.count(b"\0")       # bit 0 of each byte: page resident
    return min(size, resident * PAGE)


def cache_report(paths):
    """{files, bytes, cached_bytes, cached_fraction} of a set of files;
    cached_bytes None (error kept) where mincore was refused."""
    total, cached, err = 0, 0, None
    for p in paths:
        total += os.path.getsize(p)
        try:
            cached += cached_bytes(p)
        except OSError as e:
            err = f"{p}: {e}"
    if err:
        return dict(files=len(paths), bytes=total, cached_bytes=None, cached_fraction=None, error=err)
    return dict(files=len(paths), bytes=total, cached_bytes=cached,
                cached_fraction=cached / total if total else None)


def meminfo():
    """/proc/meminfo in bytes ({} where it does not exist)."""
    out = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                parts = v.split()
                if parts:
                    out[k] = int(parts[0]) * (1024 if len(parts) > 1 else 1)
    except OSError:
        pass
    return out


def self_rss():
    """This process's VmRSS, RssAnon, RssFile, VmHWM (bytes) from /proc/self/status."""
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


def drop_pages(paths):
    """Drop the files' pages from the page cache: fsync (dirty pages cannot
    be dropped), then posix_fadvise(DONTNEED) over each whole file."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            try:
                os.fsync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def try_drop_caches():
    """sync; echo 1 > /proc/sys/vm/drop_caches (the whole page cache): a
    container usually may not. Returns (ok, message)."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
        return True, "written"
    except OSError as e:
        return False, f"not writable ({type(e).__name__}: {e})"


def filesystem_of(path):
    """{mount, fstype, source, device, rotational, model} of the filesystem
    holding path, best effort (/proc/mounts, /sys/dev/block)."""
    path = os.path.realpath(path)
    best = None
    try:
        with open("/proc/mounts") as f:
            for line in f:
                src, mnt, fstype = line.split()[:3]
                mnt = mnt.replace("\\040", " ")
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and (
                        best is None or len(mnt) >= len(best[1])):
                    best = (src, mnt, fstype)
    except OSError:
        pass
    out = dict(mount=best and best[1], fstype=best and best[2], source=best and best[0])
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    out["device"] = dev
    sysdir = f"/sys/dev/block/{dev}"
    if os.path.exists(sysdir):
        real = os.path.realpath(sysdir)
        out["block"] = os.path.basename(real)
        for d in (real, os.path.dirname(real)):         # a partition's parent is the disk
            for key, rel in (("rotational", "queue/rotational"), ("model", "device/model")):
                f = os.path.join(d, rel)
                if key not in out and os.path.exists(f):
                    out[key] = open(f).read().strip()
    try:
        s = os.statvfs(path)
        out["free_bytes"] = s.f_bavail * s.f_frsize
    except OSError:
        pass
    return out


def _chunks(paths, req):
    """(path index, offset) of every request of req bytes over the files, in order."""
    return [(i, off) for i, p in enumerate(paths) for off in range(0, os.path.getsize(p), req)]


def read_bandwidth(paths, req_bytes, streams, direct, max_bytes=None, max_s=None):
    """Sequential read bandwidth over the files in order: `streams` threads
    take the next request of req_bytes from one queue (so 4 streams keep 4
    requests in flight, as a reader with a queue depth of 4 would), each
    into its own page-aligned buffer, until the files end, max_bytes were
    read or max_s passed. direct: O_DIRECT (req_bytes a multiple of the
    device's logical block; the offsets are multiples of req_bytes).
    Returns {bytes, seconds, bytes_per_s, ...}; raises OSError where the
    filesystem refuses O_DIRECT (tmpfs: EINVAL)."""
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    fds = [os.open(p, flags) for p in paths]
    chunks = _chunks(paths, req_bytes)
    state = dict(next=0, bytes=0, err=None)
    lock = threading.Lock()
    deadline = [None]

    def worker():
        buf = mmap.mmap(-1, req_bytes)         # anonymous: page aligned
        try:
            while True:
                with lock:
                    if (state["err"] or state["next"] >= len(chunks)
                            or (max_bytes and state["bytes"] >= max_bytes)
                            or time.perf_counter() > deadline[0]):
                        return
                    i, off = chunks[state["next"]]
                    state["next"] += 1
                try:
                    n = os.preadv(fds[i], [buf], off)
                except OSError as e:
                    with lock:
                        state["err"] = e
                    return
                with lock:
                    state["bytes"] += n
        finally:
            buf.close()

    try:
        t0 = time.perf_counter()
        deadline[0] = t0 + (max_s if max_s else 1e9)
        threads = [threading.Thread(target=worker) for _ in range(streams)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
    finally:
        for fd in fds:
            os.close(fd)
    if state["err"]:
        raise state["err"]
    total = sum(os.path.getsize(p) for p in paths)
    return dict(io="direct" if direct else "buffered", streams=streams, request_bytes=req_bytes,
                bytes=state["bytes"], seconds=dt, bytes_per_s=state["bytes"] / dt if dt else None,
                whole_files=state["bytes"] >= total, files_bytes=total)


def parse_read_configs(text):
    """'1x8,4x16' -> [(streams 1, 8 MiB), (4, 16 MiB)]."""
    out = []
    for item in text.split(","):
        if item.strip():
            s, _, m = item.strip().partition("x")
            out.append((int(s), int(float(m) * MIB)))
    return out


def measure_disk(paths, configs, max_bytes, max_s, log, buffered_req=16 * MIB, drop_caches=True):
    """The read measurements of the disk-tier benchmark: each O_DIRECT
    configuration (streams, request) over the files, then one buffered
    stream after the files' pages were dropped (and the cache state before
    and after each). drop_caches: try /proc/sys/vm/drop_caches first (the
    whole machine's cache). Returns {drop_caches, runs: [...],
    best_direct_bytes_per_s, ...}."""
    out = dict(files=[os.path.basename(p) for p in paths],
               files_bytes=sum(os.path.getsize(p) for p in paths), runs=[])
    ok, msg = try_drop_caches() if drop_caches else (False, "not tried (--drop-caches no)")
    out["drop_caches"] = dict(ok=ok, message=msg)
    log(f"disk: /proc/sys/vm/drop_caches: {'dropped' if ok else msg}")
    drop_pages(paths)
    out["cache_after_drop"] = cache_report(paths)
    log(f"disk: after fsync + fadvise(DONTNEED): {_cached_text(out['cache_after_drop'])} of the "
        f"{out['files_bytes'] / 1e9:.2f} GB cached")
    for direct, streams, req in [(True, s, r) for s, r in configs] + [(False, 1, buffered_req)]:
        if not direct:
            drop_pages(paths)
        before = cache_report(paths)
        try:
            r = read_bandwidth(paths, req, streams, direct, max_bytes, max_s)
        except OSError as e:
            r = dict(io="direct" if direct else "buffered", streams=streams, request_bytes=req,
                     error=f"{type(e).__name__}: {e}")
            log(f"disk: {r['io']} x{streams} {req // MIB} MiB: FAILED ({r['error']})")
            out["runs"].append(r)
            continue
        r["cache_before"], r["cache_after"] = before, cache_report(paths)
        out["runs"].append(r)
        log(f"disk: {r['io']:8s} x{streams} {req // MIB:3d} MiB requests: {r['bytes_per_s'] / 1e9:6.2f} GB/s "
            f"({r['bytes'] / 1e9:.2f} GB in {r['seconds']:.2f} s; cached before "
            f"{_cached_text(before)}, after {_cached_text(r['cache_after'])})")
    drop_pages(paths)           # leave the files out of the cache for what follows
    direct = [r for r in out["runs"] if r["io"] == "direct" and r.get("bytes_per_s")]
    single = [r for r in direct if r["streams"] == 1]
    buf = [r for r in out["runs"] if r["io"] == "buffered" and r.get("bytes_per_s")]
    out["best_direct_bytes_per_s"] = max((r["bytes_per_s"] for r in direct), default=None)
    out["best_direct_single_stream_bytes_per_s"] = max((r["bytes_per_s"] for r in single), default=None)
    out["buffered_bytes_per_s"] = buf[0]["bytes_per_s"] if buf else None
    return out


def _cached_text(rep):
    if rep.get("cached_bytes") is None:
        return "n/a"
    return f"{rep['cached_bytes'] / 1e9:.2f} GB"
