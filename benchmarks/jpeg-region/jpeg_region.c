/*
 * What decoding fewer JPEG pixels buys, measured with libjpeg-turbo itself (Debian's libjpeg62-turbo,
 * SIMD): full decodes against DCT-domain scaling by M/8 and against decoding only the region a
 * random resized crop needs (jpeg_skip_scanlines + jpeg_crop_scanline), on one core. Also checks
 * that a region decode gives exactly the full decode's pixels, with and without a margin of one
 * iMCU (16 pixels) around the region: fancy upsampling treats a region's edge as the image's edge.
 *
 * Usage: jpeg_region DIR   (JPEGs in DIR/CLASS/, e.g. the real-photo set of benchmarks/make_photos.py)
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jpeglib.h>

typedef struct { unsigned char *data; unsigned long size; int width, height; } jpeg_file;
typedef struct { int x, y, w, h; } region;

static jpeg_file files[20000];
static int file_count;

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void load(const char *root) {
  DIR *top = opendir(root);
  if (!top) { perror(root); exit(2); }
  struct dirent *cls;
  while ((cls = readdir(top)) && file_count < 20000) {
    if (cls->d_name[0] == '.') continue;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root, cls->d_name);
    DIR *d = opendir(dir);
    if (!d) continue;
    struct dirent *f;
    while ((f = readdir(d)) && file_count < 20000) {
      if (!strstr(f->d_name, ".jpg")) continue;
      char path[8192];
      snprintf(path, sizeof path, "%s/%s", dir, f->d_name);
      FILE *in = fopen(path, "rb");
      fseek(in, 0, SEEK_END);
      jpeg_file *j = &files[file_count++];
      j->size = ftell(in);
      fseek(in, 0, SEEK_SET);
      j->data = malloc(j->size);
      if (fread(j->data, 1, j->size, in) != j->size) { perror(path); exit(2); }
      fclose(in);
    }
    closedir(d);
  }
  closedir(top);
}

/* Decodes r (in output pixels at scale num/8; the whole image when r is NULL) into out, RGB. */
static void decode(jpeg_file *j, int num, const region *r, int margin, unsigned char *out) {
  struct jpeg_decompress_struct c;
  struct jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_decompress(&c);
  jpeg_mem_src(&c, j->data, j->size);
  jpeg_read_header(&c, TRUE);
  c.out_color_space = JCS_RGB;
  c.scale_num = num;
  c.scale_denom = 8;
  jpeg_start_decompress(&c);
  j->width = c.output_width;
  j->height = c.output_height;
  region all = {0, 0, (int) c.output_width, (int) c.output_height};
  if (!r) r = &all;
  int left = r->x - margin < 0 ? 0 : r->x - margin;
  int right = r->x + r->w + margin > (int) c.output_width ? (int) c.output_width : r->x + r->w + margin;
  JDIMENSION x = left, w = right - left;
  if (r != &all) jpeg_crop_scanline(&c, &x, &w);
  int skip = margin ? (r->y / 16 - 1) * 16 : r->y;
  if (skip > 0) jpeg_skip_scanlines(&c, skip);
  unsigned char row[8192 * 3];
  JSAMPROW rows[1] = {row};
  while ((int) c.output_scanline < r->y + r->h) {
    int y = c.output_scanline;
    jpeg_read_scanlines(&c, rows, 1);
    if (y >= r->y) memcpy(out + (size_t) (y - r->y) * r->w * 3, row + (r->x - (int) x) * 3, (size_t) r->w * 3);
  }
  jpeg_abort_decompress(&c);
  jpeg_destroy_decompress(&c);
}

/* torchvision's RandomResizedCrop region: scale (0.08, 1), ratio (3/4, 4/3), 10 tries. */
static region random_crop(int w, int h) {
  for (int t = 0; t < 10; t++) {
    double area = (double) w * h * (0.08 + 0.92 * rand() / (double) RAND_MAX);
    double ratio = exp(log(0.75) + (log(4.0 / 3) - log(0.75)) * rand() / (double) RAND_MAX);
    int cw = (int) lround(sqrt(area * ratio)), ch = (int) lround(sqrt(area / ratio));
    if (cw > 0 && ch > 0 && cw <= w && ch <= h) {
      region r = {rand() % (w - cw + 1), rand() % (h - ch + 1), cw, ch};
      return r;
    }
  }
  region r = {0, 0, w < h ? w : h, w < h ? w : h};
  return r;
}

static unsigned char *scratch, *full;

static double rate(const char *name, int num, region *crops, int margin) {
  double start = seconds();
  for (int i = 0; i < file_count; i++) decode(&files[i], num, crops ? &crops[i] : NULL, margin, scratch);
  double r = file_count / (seconds() - start);
  printf("  %-46s %6.0f images/s\n", name, r);
  return r;
}

int main(int argc, char **argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s DIR\n", argv[0]); return 2; }
  load(argv[1]);
  scratch = malloc(8192 * 8192 * 3);
  full = malloc(8192 * 8192 * 3);
  srand(1);
  region *crops = malloc(sizeof(region) * file_count);
  decode(&files[0], 8, NULL, 0, scratch); /* sizes */
  for (int i = 0; i < file_count; i++) {
    decode(&files[i], 8, NULL, 0, scratch);
    crops[i] = random_crop(files[i].width, files[i].height);
  }
  printf("%d JPEGs from %s, one core\n", file_count, argv[1]);
  for (int round = 1; round <= 2; round++) {
    printf("round %d\n", round);
    rate("full decode", 8, NULL, 0);
    rate("DCT scale 5/8 (a 375-pixel side to 234)", 5, NULL, 0);
    rate("DCT scale 4/8", 4, NULL, 0);
    rate("random-resized-crop region, 16-pixel margin", 8, crops, 16);
  }
  int exact = 0, exact_without_margin = 0, checks = 0;
  for (int i = 0; i < file_count && i < 200; i++) {
    jpeg_file *j = &files[i];
    decode(j, 8, NULL, 0, full);
    for (int t = 0; t < 10; t++, checks++) {
      int w = 1 + rand() % j->width, h = 1 + rand() % j->height;
      region r = {rand() % (j->width - w + 1), rand() % (j->height - h + 1), w, h};
      for (int margin = 0; margin <= 16; margin += 16) {
        decode(j, 8, &r, margin, scratch);
        int same = 1;
        for (int y = 0; y < h && same; y++)
          same = !memcmp(scratch + (size_t) y * w * 3, full + ((size_t) (r.y + y) * j->width + r.x) * 3, (size_t) w * 3);
        if (margin) exact += same; else exact_without_margin += same;
      }
    }
  }
  printf("region decode == full decode's region: %d/%d with a 16-pixel margin, %d/%d without\n",
         exact, checks, exact_without_margin, checks);
  return 0;
}
