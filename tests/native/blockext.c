/* A small CPython extension for the native-frame tests, built by the test against the
 * interpreter it runs under: functions that block in native code with the GIL released
 * (nanosleep, pthread_cond_wait) and one that spins in C while holding the GIL. Their names
 * must show as native frames inside the Python frames that called them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

__attribute__((noinline)) static void blockext_sleep_forever(void)
{
    for (;;) {
        struct timespec ts = {3600, 0};

        nanosleep(&ts, NULL);
    }
}

static PyObject *block_nogil(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    Py_BEGIN_ALLOW_THREADS blockext_sleep_forever();
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

__attribute__((noinline)) static void blockext_wait_cond(void)
{
    pthread_mutex_lock(&mu);
    for (;;)
        pthread_cond_wait(&cv, &mu);
}

static PyObject *block_cond(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    Py_BEGIN_ALLOW_THREADS blockext_wait_cond();
    Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

__attribute__((noinline)) static unsigned long blockext_spin(volatile unsigned long *x)
{
    for (;;)
        (*x)++;
    return *x;
}

/* Holds the GIL the whole time: other Python threads of the process stall. */
static PyObject *spin_with_gil(PyObject *self, PyObject *args)
{
    volatile unsigned long x = 0;

    (void)self;
    (void)args;
    blockext_spin(&x);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"block_nogil", block_nogil, METH_NOARGS, "nanosleep forever, GIL released"},
    {"block_cond", block_cond, METH_NOARGS, "pthread_cond_wait forever, GIL released"},
    {"spin_with_gil", spin_with_gil, METH_NOARGS, "spin in C forever holding the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {
    PyModuleDef_HEAD_INIT, "blockext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_blockext(void)
{
    return PyModule_Create(&mod);
}
