# Airlock's threads (scripts/threads/thread_pthread_stubs.h) linked into
# python.wasm after the stages before it. Run inside build-python.sh's
# chroot as its own cached stage:
#   /work/pybuild        CPython's build (its flags, its objects, its link)
#   STAGE_BUILDS         the build folders of the stages before this one
#   STAGE_HANDMADE       the chart stage's list of modules it compiled
#                        without meson (scripts/charts/link.py)
# Writes /work/threads/python.wasm.
#
# Only Python/thread.c is compiled again, with the stubs header replaced
# by ours (thread.c includes it by a quoted name, so a copy of thread.c
# beside ours finds ours); the link takes that object instead of
# CPython's. Everything else was compiled against the stubs' types, which
# ours keeps, so no other stage is built again when the threads change.
set -euo pipefail
W=/work
X=$W/threads
rm -rf $X/src $X/link $X/thread.o $X/python.wasm
mkdir -p $X/src
log() { echo "build-threads: $*" >&2; }

cp $W/$PY_PKG/Python/thread.c $W/$PY_PKG/Python/thread_pthread.h $X/src/
cp /threads/thread_pthread_stubs.h $X/src/
log "compiling Python/thread.c with Airlock's threads"
make -s -C $W/pybuild -f Makefile -f /threads/thread.mk airlock-thread-object SRC=$X/src/thread.c OBJ=$X/thread.o

log "linking python.wasm"
python3.13 /charts/link.py $W/pybuild $X/link $STAGE_HANDMADE $STAGE_BUILDS
# link.py's rule links every object of CPython's but config.o: thread.o
# goes the same way, and ours comes in its place.
grep -q 'filter-out Modules/config.o,' $X/link/link.mk || { log "link.mk is not laid out as expected"; exit 1; }
sed -i "s|filter-out Modules/config.o,|filter-out Modules/config.o Python/thread.o,|; s|Programs/python.o |Programs/python.o $X/thread.o |" $X/link/link.mk
make -s -C $W/pybuild -f Makefile -f $X/link/link.mk builtins-link
