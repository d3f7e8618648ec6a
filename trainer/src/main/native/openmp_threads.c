/*
 * OpenMpThreads.limitThisThread0: omp_set_num_threads in the OpenMP runtime oneDNN already loaded
 * (JavaCPP's bundled libgomp.so.1), found by its soname without loading another copy. The count is
 * the calling thread's own (an OpenMP ICV of that initial thread), so each CPU stream, and so each
 * data-parallel rank in one JVM, sizes its oneDNN teams by itself.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <jni.h>

JNIEXPORT jstring JNICALL Java_dev_ramtrain_trainer_backend_cpu_OpenMpThreads_limitThisThread0(
    JNIEnv *env, jclass cls, jint threads) {
  (void)cls;
  void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (gomp == NULL) {
    return (*env)->NewStringUTF(env, "libgomp.so.1 is not loaded");
  }
  void (*set)(int) = (void (*)(int))dlsym(gomp, "omp_set_num_threads");
  if (set == NULL) {
    dlclose(gomp);
    return (*env)->NewStringUTF(env, "libgomp.so.1 has no omp_set_num_threads");
  }
  set((int)threads);
  dlclose(gomp);
  return NULL;
}

/* OpenMpThreads.ofThisThread0: omp_get_max_threads of the calling thread, or -1 without a runtime. */
JNIEXPORT jint JNICALL Java_dev_ramtrain_trainer_backend_cpu_OpenMpThreads_ofThisThread0(
    JNIEnv *env, jclass cls) {
  (void)env;
  (void)cls;
  void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (gomp == NULL) {
    return -1;
  }
  int (*get)(void) = (int (*)(void))dlsym(gomp, "omp_get_max_threads");
  int threads = get == NULL ? -1 : get();
  dlclose(gomp);
  return threads;
}
