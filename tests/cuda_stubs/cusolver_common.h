#pragma once
typedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;
