# mail: sends to several inboxes, large bodies that span many blocks,
# two batches, replies and two sweeps.
C=chipset
R1=$(id); op send-request $C mail send --from lead --to a1 --kind request --subject plan --task t7 --expects-reply --body-file /data/body-200k.txt --id $R1
R2=$(id); op send-request $C mail send --from lead --to a2 --kind request --subject plan --task t7 --expects-reply --body "plan for a2" --id $R2
op send-notify $C mail send --from lead --to a3 --kind notify --subject note --task t7 --body-file /data/body-100k.txt
op batch-50 /bin/send_batch $CHIPSET_ROOT 50
op send-response $C mail send --from a1 --to lead --kind response --subject plan --task t7 --in-reply-to $R1 --body-file /data/body-100k.txt
op send-response $C mail send --from a2 --to lead --kind response --subject plan --task t7 --in-reply-to $R2 --body "ok from a2"
op sweep $C mail sweep t7
R3=$(id); op send-request $C mail send --from lead --to a1 --kind request --subject second --task t8 --expects-reply --body "second round" --id $R3
op send-notify $C mail send --from a2 --to a1 --kind notify --subject aside --task t8 --priority urgent --body "urgent aside"
op batch-30 /bin/send_batch $CHIPSET_ROOT 30
op send-response $C mail send --from a1 --to lead --kind response --subject second --task t8 --in-reply-to $R3 --body-file /data/body-200k.txt
op sweep $C mail sweep t8
op mail-archive $C mail archive $R3
