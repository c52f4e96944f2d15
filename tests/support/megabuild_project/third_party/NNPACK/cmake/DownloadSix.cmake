# Stands in for NNPACK's script of the same name, which downloads the six module at configure
# time; the driver must empty it before the first configure.
message(FATAL_ERROR "DownloadSix.cmake ran: the build tried to download six")
