# Compiles SRC (a copy of Python/thread.c) to OBJ with CPython's own flags
# for its core: used with CPython's Makefile (make -f Makefile -f this).
airlock-thread-object:
	$(CC) -c $(PY_CORE_CFLAGS) -o $(OBJ) $(SRC)
