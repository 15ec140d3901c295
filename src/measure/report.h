/* memest-measure's report: memest's predictions beside what the GPU did,
 * with the relative error (predicted − measured) / measured. Plain C: the
 * formatting is tested on synthetic numbers (tests/measure/test_report.c). */
#ifndef MEMEST_MEASURE_REPORT_H
#define MEMEST_MEASURE_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "memest/memest.h"

typedef enum MeUnit { ME_UNIT_BYTES = 0, ME_UNIT_SECONDS } MeUnit;

/* One figure: either side may be absent (memest does not model cuDNN's
 * workspace; a GPU-less run measures nothing). */
typedef struct MeCompare {
    const char *name;
    MeUnit unit;
    bool has_pred, has_meas;
    double pred, meas;
} MeCompare;

typedef struct MeLayerCompare {
    const char *name;   /* module name */
    const char *op;
    MemestPhase phase;
    bool has_live;      /* live bytes at the layer's timeline point(s): the highest */
    double pred_live, meas_live;
    bool has_time;      /* seconds per step */
    double pred_s, meas_s;
} MeLayerCompare;

typedef struct MeMeasureReport {
    const char *model;      /* path */
    const char *mode;       /* "inference" or "training" */
    const char *optimizer;  /* training: "sgd", ... */
    int64_t batch;
    const char *device;     /* "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB)" */
    const char *software;   /* "driver 12.4, CUDA runtime 13.0, cuBLAS ..., cuDNN ..." */
    const char *conv;       /* how convolutions ran: "cuDNN", "direct kernels" */
    const char *profile;    /* where the roofline's GPU figures came from */
    bool plan_matches;      /* the executed plan is memest's timeline, event for event */
    const char *plan_detail;
    int warmup, iterations;
    const MeCompare *memory;
    int n_memory;
    const MeCompare *time;
    int n_time;
    const MeLayerCompare *layers;
    int n_layers;
} MeMeasureReport;

/* (pred − meas) / meas in percent; false when either is absent or meas is 0. */
bool me_rel_error(bool has_pred, double pred, bool has_meas, double meas, double *pct);
/* The error as the table shows it: "+3.2%", "-0.4%", "-". */
void me_format_error(char *buf, size_t n, bool has_pred, double pred, bool has_meas, double meas);
/* A figure as the table shows it: "123.45 MiB", "12.345 ms", "-". */
void me_format_value(char *buf, size_t n, MeUnit unit, bool has, double v);

typedef enum MeReportFormat { ME_REPORT_TABLE = 0, ME_REPORT_JSON } MeReportFormat;
int me_measure_report_write(FILE *f, const MeMeasureReport *r, MeReportFormat format);

#endif
