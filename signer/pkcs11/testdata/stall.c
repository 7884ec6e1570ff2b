/*
 * stall.c: a PKCS#11 module that is SoftHSM2 with one difference: while the
 * file STALL_FILE exists, C_Sign does not return. It stands for a token
 * that stops answering mid-call (a network HSM cut off), which SoftHSM2
 * itself never does. Every other function is SoftHSM2's own, from its
 * function list. TestHungToken builds it with the real module's path and
 * the file's compiled in:
 *   cc -shared -fPIC -I<miekg/pkcs11> -DREAL_MODULE='"..."' -DSTALL_FILE='"..."' stall.c -ldl
 */
#include <dlfcn.h>
#include <unistd.h>

#define CK_PTR *
#define CK_DECLARE_FUNCTION(returnType, name) returnType name
#define CK_DECLARE_FUNCTION_POINTER(returnType, name) returnType(*name)
#define CK_CALLBACK_FUNCTION(returnType, name) returnType(*name)
#ifndef NULL_PTR
#define NULL_PTR 0
#endif
#include "pkcs11.h"

static CK_FUNCTION_LIST stalling;
static CK_C_Sign real_sign;

static CK_RV stall_sign(CK_SESSION_HANDLE session, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig, CK_ULONG_PTR sig_len) {
	while (access(STALL_FILE, F_OK) == 0)
		usleep(10000);
	return real_sign(session, data, len, sig, sig_len);
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR out) {
	void *h = dlopen(REAL_MODULE, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		return CKR_GENERAL_ERROR;
	CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(h, "C_GetFunctionList");
	CK_FUNCTION_LIST_PTR real;
	CK_RV rv;
	if (get == NULL)
		return CKR_GENERAL_ERROR;
	if ((rv = get(&real)) != CKR_OK)
		return rv;
	stalling = *real;
	real_sign = real->C_Sign;
	stalling.C_Sign = stall_sign;
	*out = &stalling;
	return CKR_OK;
}
