# SSJF study (issue 14).
