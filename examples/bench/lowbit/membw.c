// RAM read bandwidth, the memory roof of decode (bytes a token reads / this = the fastest decode):
// T threads (default 2) sum their halves of a 1 GiB buffer with AVX2 loads, best of 5 passes.
// Build: cc -O2 -mavx2 -pthread membw.c -o membw && ./membw 2
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <immintrin.h>
#define N (1u<<27)
static int64_t *buf; static int nt;
static void *work(void *p){ long t=(long)p; size_t per=N/nt; __m256i a=_mm256_setzero_si256(),b=a,c=a,d=a;
 const __m256i *v=(const __m256i*)(buf+t*per); for(size_t i=0;i<per/4;i+=4){a=_mm256_add_epi64(a,v[i]);b=_mm256_add_epi64(b,v[i+1]);c=_mm256_add_epi64(c,v[i+2]);d=_mm256_add_epi64(d,v[i+3]);}
 a=_mm256_add_epi64(_mm256_add_epi64(a,b),_mm256_add_epi64(c,d)); int64_t o[4]; _mm256_storeu_si256((__m256i*)o,a); return (void*)(intptr_t)(o[0]+o[1]+o[2]+o[3]);}
static double now(){struct timespec ts;clock_gettime(CLOCK_MONOTONIC,&ts);return ts.tv_sec+ts.tv_nsec*1e-9;}
int main(int c,char**v){ nt=c>1?atoi(v[1]):2; buf=aligned_alloc(64,N*8); memset(buf,1,N*8); double best=0;
 for(int r=0;r<5;r++){pthread_t th[16]; double t0=now(); for(long i=0;i<nt;i++)pthread_create(&th[i],0,work,(void*)i); for(int i=0;i<nt;i++)pthread_join(th[i],0); double dt=now()-t0; double g=N*8.0/dt/1e9; if(g>best)best=g;}
 printf("%.2f GB/s (%d threads)\n",best,nt); }
